"""The edit decoder: its rule (policy.py) and its card (card.py)."""
