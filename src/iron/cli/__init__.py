"""The ``iron`` command line (presentation only; the logic lives in the packages it calls)."""
