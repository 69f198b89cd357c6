"""The kernel language front end: annotations, symbols, traced values and tracing."""
