"""Sizing a deployment from predictions: the best K and batch (`sizer`), launch
commands for the engines (`launch`), the pre-flight checklist (`preflight`) and
sizing reports (`reports`).

May import `simulator.errors`, `simulator.inputs` and `simulator.model`; nothing of
serving/, validation/, search/ or cli/.
"""
