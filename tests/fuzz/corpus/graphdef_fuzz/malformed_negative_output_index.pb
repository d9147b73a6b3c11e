

xPlaceholder*
dtype0

nNegx:-1*
T0