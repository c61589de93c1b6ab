"""Front-end tests (a package, so that its helper modules have unique import names)."""
