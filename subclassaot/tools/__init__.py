"""What users and authors run on top of the pipeline: the conformance checker, explain, the parity oracle, the
fuzzer, the command line and the torch.compile backend adapter (dynamo_backend.py, the only code that talks to
Dynamo)."""
