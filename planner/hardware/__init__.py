"""hardware: What can be rented: the accelerator catalog, regions, units and hardware facts."""
