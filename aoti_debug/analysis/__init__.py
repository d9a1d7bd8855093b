"""Reading records and dumps back: parsing, masking, and the checks built on them."""
