"""The core runtime behind the public modules: call frames, the loop, root and nested runs
(layer 1, private). Users and integrations import the public modules instead."""
