"""report: How a plan is told: markdown and summary renderers, schemas, noise grouping and the tag protocol that components/ write and policies/ read."""
