"""workload: The question and the answer's shape: the workload file (spec, presets, defaults), its strict parsing and error wording, and the plan model every later stage fills in."""
