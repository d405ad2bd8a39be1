"""The `cme` backend: steady state of the chemical master equation (issue 10)."""
