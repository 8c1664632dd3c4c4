from conformance.profiles import load_profile

load_profile()
