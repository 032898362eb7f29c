"""Helpers the test modules share, imported as `support.<module>` (pyproject's `pythonpath = ["tests"]`):

- `net`: a free port on 127.0.0.1, and a TCP relay that plays a server that stops.
- `cli`: the one runner of the `docpipe` command in a subprocess.
- `contracts`: small generated contract PDFs.
- `server`: a real `docpipe serve` (or `serve()` with options) on 127.0.0.1, its calls and error checks.
- `vllm_server`: a real `vllm serve` of the tiny Qwen3 on 127.0.0.1.
- `redis_server`: a throwaway `redis-server` on 127.0.0.1.
- `probes`: the security probes run by tests/security and benchmarks/security_probes.py.

No test module imports another: what two of them need lives here.
"""
