"""`make chaos`: the fault harness (`python -m tests.chaos.harness`)."""
