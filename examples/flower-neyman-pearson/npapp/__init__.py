"""Neyman-Pearson on Flower with constrfl: a ServerApp and a ClientApp."""
