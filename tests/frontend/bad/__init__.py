"""Malformed kernels for test_errors.py."""
