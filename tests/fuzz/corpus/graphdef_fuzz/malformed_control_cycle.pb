

xPlaceholder*
dtype0

aNegx^b*
T0

bNega*
T0