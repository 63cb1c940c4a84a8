// node drive.mjs SCENARIO: run one scenario of scenarios.mjs, print what it saw as JSON.
import * as scenarios from "./scenarios.mjs";

const name = process.argv[2];
const scenario = scenarios[name];
if (!scenario) {
  console.error(`no scenario ${name}`);
  process.exit(2);
}
const seen = await scenario();
process.stdout.write(JSON.stringify(seen));
