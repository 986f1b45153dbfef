"""Serving analytics over the step model: rates, the closed loop, the load knee and the sweep grid."""
