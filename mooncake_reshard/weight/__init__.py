"""placeholder: replaced by the manifest layer"""
