"""The Gradio contract workbench, installed as ``docpipe.ui``: `docpipe.ui.app.build_app`, or
``python -m docpipe.ui.app`` / ``docpipe ui``. Needs the ui extra (``pip install 'docpipe-contracts[ui]'``).
May import docpipe's public API and the small shared modules `docpipe.names`, `docpipe.summary` and
`docpipe.access.login`; nothing in docpipe imports it except ``docpipe serve`` and ``docpipe ui``.
"""
