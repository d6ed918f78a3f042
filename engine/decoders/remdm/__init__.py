"""The remdm decoder: its rule (policy.py) and its card (card.py)."""
