"""Documents: loading local or Hub rows, the calibration / evaluation split, our YAML configs."""
