"""Settings, one module per role: dev (default), test, production."""
