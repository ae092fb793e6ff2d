"""Optimization: DSPy compilation of the program's prompts (`compiling`, saved as `artifacts`, on `splits` of the
questions, with `teacher_traces` for fine-tuning), and tuning of its thresholds by replay (`replay`, `rescore`,
`tuning`; the pooling weights' likelihood fit `pool_fit`, the learned verifier's `verifier_fit`)."""
