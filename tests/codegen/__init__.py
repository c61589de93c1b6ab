"""Tests of the C-family emitter and the NVRTC compile path (a package, so its helpers have unique import names)."""
