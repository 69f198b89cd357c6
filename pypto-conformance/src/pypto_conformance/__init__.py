"""pypto-conformance."""
