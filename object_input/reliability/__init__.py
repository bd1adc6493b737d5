"""Reliability: why a record is bad, the error policy, catching op errors, skip counts and the epoch
audit."""
