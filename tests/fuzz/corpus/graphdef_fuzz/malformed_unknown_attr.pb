

xPlaceholder*
dtype0
&
nNegx*
colourblue*
T0