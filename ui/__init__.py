"""The Gradio contract workbench: `ui.app.build_app` / `python -m ui.app`."""
