"""eos's tests: unit, integration, the chaos harness, and the support code they share."""
