"""The Python API's own functions (`evaluate`: the run harness of `clearmed eval` from Python). The package face
(`clearmed/__init__.py`) re-exports them beside `load_config`, `build_program` and `results_frame`. A layer of its
own at the top, beside the command line: neither imports the other."""
