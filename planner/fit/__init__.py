"""The fit of a profile's coefficients to measured rows (`kvplan calibrate --from-bench`)."""
