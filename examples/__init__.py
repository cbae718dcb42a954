"""Example programs; each also runs as a script. A package so that the tests, `make bench` and the chaos
pipeline use the example's stateful `process` functions rather than copies of them."""
