"""The analysis pipeline: inputs -> timeline -> components -> calls -> tables, with an account.

:mod:`.stream` is the same analysis in bounded memory for one large capture (or a ring buffer).
"""
