"""The core's passes, one module each with `run(context)`; `lowering.pipeline` lists them in order.

What passes share lives in `lowering.services`; the optional features' passes live in their own
folders under `lowering.features`. A pass never imports another pass.
"""
