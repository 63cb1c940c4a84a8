// Following the conversation. The page scrolls as a whole, its header pinned at the top and
// its composer at the bottom; while the reader is at the newest content, new content is
// scrolled into view as it comes. A reader who scrolled up stays where they are, and a
// "New messages" pill (above the composer) takes them back down. The heights of the pinned
// header and composer are kept in CSS variables, so anything scrolled into view (a question
// card) lands between them, not under them.

const NEAR = 48; // px from the bottom that still counts as "at the newest content"

function scroller() {
  return document.scrollingElement || document.documentElement;
}

export class Follower {
  /**
   * @param {{watched: HTMLElement[], pill: HTMLButtonElement, header: HTMLElement,
   *   composer: HTMLElement, onMove?: () => void}} parts what grows, the pill, the pinned
   *   bars, and what to call after every scroll or change (e.g. to show other hints).
   */
  constructor({ watched, pill, header, composer, onMove }) {
    this.pill = pill;
    this.onMove = onMove || (() => {});
    this.stick = true;
    this.lastTop = scroller().scrollTop;
    this.pending = 0;
    pill.addEventListener("click", () => this.follow());
    window.addEventListener("scroll", () => this.scrolled(), { passive: true });
    window.addEventListener("resize", () => this.changed());
    const observer = new MutationObserver(() => this.changed());
    for (const node of watched) observer.observe(node, { childList: true, subtree: true, characterData: true });
    const sizes = new ResizeObserver(() => {
      const root = document.documentElement.style;
      root.setProperty("--header-h", `${header.offsetHeight}px`);
      root.setProperty("--composer-h", `${composer.offsetHeight}px`);
      this.changed();
    });
    sizes.observe(header);
    sizes.observe(composer);
  }

  atBottom() {
    const s = scroller();
    return s.scrollHeight - s.scrollTop - window.innerHeight <= NEAR;
  }

  /** Back to the newest content, and follow it from now on (a sent message, the pill). */
  follow() {
    this.stick = true;
    this.pill.hidden = true;
    this.scrollDown();
  }

  scrollDown() {
    const s = scroller();
    window.scrollTo({ top: s.scrollHeight, behavior: "auto" });
    this.lastTop = s.scrollTop;
  }

  scrolled() {
    const top = scroller().scrollTop;
    if (this.atBottom()) {
      this.stick = true;
      this.pill.hidden = true;
    } else if (top < this.lastTop - 1) {
      this.stick = false; // the reader went up: leave them there
    }
    this.lastTop = top;
    this.onMove();
  }

  /** New content (or a new size): follow it, or say it is there. Once a frame at most. */
  changed() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      if (this.stick) this.scrollDown();
      else if (!this.atBottom()) this.pill.hidden = false;
      this.onMove();
    });
  }
}
