"""The annotated summary: each row of ``model.summary()`` with the formula of its parameter count.

`collect` walks the model, `formulas` says where each row's formula comes from, `report` holds and renders the
result. ``from kerasbert import summary`` is the entry.
"""
