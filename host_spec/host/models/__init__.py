"""Model adapters of the reference host: the model seam and the keyless scripted model.
"""
