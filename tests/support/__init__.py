"""Code the tests, the chaos harness and `make bench` share; not part of eos (users check their own
pipelines with `eos.testing`)."""
