"""Sizing a deployment from predictions: the best K and batch (`sizer`), launch
commands for the engines (`launch`), the pre-flight checklist (`preflight`) and
sizing reports (`reports`), and the model's validated error carried to replicas, $ per
month and payback as ranges (`uncertainty`).

May import `simulator.errors`, `simulator.inputs`, `simulator.model` and, for that error,
`simulator.validation`; nothing of serving/, search/ or cli/.
"""
