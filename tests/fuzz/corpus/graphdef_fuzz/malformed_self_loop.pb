

nIdentityn*
T0