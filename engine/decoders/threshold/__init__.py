"""The threshold decoder: its rule (policy.py) and its card (card.py)."""
