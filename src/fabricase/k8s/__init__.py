"""Kubernetes: the API client and kubeconfig (api), node and job selection (targets), providerID parsing
(provider_id) and binary-safe pod exec (exec). The transport itself is fabricase.transports.k8s; the
`kubernetes` client is an optional extra (`pip install 'fabricase[k8s]'`), imported only when used."""
