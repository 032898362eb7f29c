"""Evaluation on CUAD-format labelled data: retrieval recall at context budgets and checklist accuracy.
Sits above the pipeline (it drives a DocPipe); only the CLI imports it.
"""
