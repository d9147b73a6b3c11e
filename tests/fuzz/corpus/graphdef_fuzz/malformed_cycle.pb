

aNegb*
T0

bNega*
T0