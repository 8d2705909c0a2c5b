"""physics: What a layout does on that hardware, from first principles: memory, serving and training step time, collectives, efficiency constants, calibration and accuracy bands."""
