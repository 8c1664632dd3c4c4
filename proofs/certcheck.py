# INTERIM SHIM (layout merge): delete after imports are rewritten (-> bounds_certificate_check)
from proofs.bounds_certificate_check import CertificateError, check_certificate, check_file  # noqa: F401
