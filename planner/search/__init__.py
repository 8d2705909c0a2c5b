"""search: Which layouts fit and rank first: candidates, the inference and training searches, the frontier and the plan built from the winner."""
