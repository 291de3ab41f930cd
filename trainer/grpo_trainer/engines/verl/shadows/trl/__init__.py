"""Not trl: what verl 0.9.1's workers import from it, and nothing else (../../trl_shadow.py says why).

Only verl's processes see this package, ahead of the real trl, which the TRL engine uses.
"""
