"""gpuplan's Pulumi program: stack config → planner → components → exported plan and cost.
The program lives in components/program.py so `gpuplan check` and the tests run the same code."""

from components.program import main

main()
